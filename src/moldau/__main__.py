"""`python -m moldau ...` runs the `moldau` command."""

from moldau.cli.main import app

if __name__ == "__main__":
    app(prog_name="moldau")
