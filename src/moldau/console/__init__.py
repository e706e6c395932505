"""The Moldau web console: a UI for any Kafka-protocol cluster (`moldau console`)."""
