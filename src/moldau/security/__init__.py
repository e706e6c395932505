"""Security: Kafka's listener protocols (TLS, SASL PLAIN and SCRAM), the standard
authorizer over ACLs in the metadata log, and client quotas.

The network edge only moves bytes (TLS transports included); a connection's
:class:`~moldau.security.session.Session` knows who it is; handlers ask
``services.authorizer`` before acting and ``services.quotas`` how long to throttle.
"""
