"""The apache.rocketmq.v2 gRPC endpoint: a thin translation over BrokerService."""
