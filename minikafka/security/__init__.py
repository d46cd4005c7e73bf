"""Security: TLS listeners, SASL authentication (PLAIN, SCRAM-SHA-256/512) and ACL authorization,
with Apache Kafka's configuration keys, principals and ZooKeeper layout.

- ``principal``: who a connection is (``User:name``), and the mapping of a certificate's subject.
- ``tls``: the ``ssl.SSLContext`` of a listener (server) and of the inter-broker client.
- ``jaas``, ``scram``, ``sasl``: the SASL mechanisms, server and client side, as pure code.
- ``session``: one connection's authentication, a table of allowed transitions.
- ``acl``: ACL bindings and filters, and the authorizer's rules (pure functions).
- ``stores``: where SCRAM credentials and ACLs live (the embedded metadata store, or ZooKeeper)
  and the broker's caches of them.
"""
