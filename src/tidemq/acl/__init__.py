"""Access control (issue #17): who may do what, on both protocols.

Pure pieces, each with one job: signing and verifying remoting requests
(RocketMQ's ACL 1.0 wire contract), the gRPC `authorization` header, the
`plain_acl.yml` policy file, permissions and the resources a request needs,
remote-address patterns. The broker, the name server and the gRPC endpoint
apply them; the client and the CLI sign with them.
"""
