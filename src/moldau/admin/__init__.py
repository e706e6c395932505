"""Admin operations the `moldau` CLI and the web console share (and the test harness).

Below both, so neither imports the other: each turns these results into its own output
(a table or JSON on the terminal, a page in the browser).
"""
