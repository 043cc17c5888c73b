"""Sans-IO client logic: pure policies the producer and consumers run."""
