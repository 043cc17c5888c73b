"""The apache.rocketmq.v2 gRPC endpoint: a thin translation over the broker's processors."""
