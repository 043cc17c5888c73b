'use strict';
// The official RocketMQ 5 Node client (rocketmq-client-nodejs, gRPC) over TLS or plain.
// argv: --endpoints HOST:PORT --topic T --group G --ssl true|false --body B [--timeout-ms N]
// Sends B (sslEnabled as --ssl says), then receives with G, acking, until that message comes.
// The client trusts the server's CA through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (grpc-js reads it).
// stdout: JSON lines {"event": ..., ...}; exit 0 done, 1 failed, 3 timed out.
const { emit, start } = require('./_official');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const opts = start(['ssl', 'body']);

async function main() {
  const { endpoints, topic, group } = opts;
  const sslEnabled = opts.ssl === 'true';
  const producer = new Producer({ endpoints, namespace: '', topics: [topic], sslEnabled });
  await producer.startup();
  const sent = await producer.send({ topic, body: Buffer.from(opts.body) });
  emit('sent', { messageId: sent.messageId, sslEnabled });
  await producer.shutdown();

  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: group, sslEnabled,
    subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
  });
  await consumer.startup();
  let mine = false;
  while (!mine) {
    for (const view of await consumer.receive(16, 15000)) {
      await consumer.ack(view);
      emit('received', { body: view.body.toString(), messageId: view.messageId });
      mine = mine || view.messageId === sent.messageId;
    }
  }
  await consumer.shutdown();
  emit('done');
}

main().then(() => process.exit(0), (err) => {
  emit('error', { name: err.name, message: String(err.message || err) });
  process.exit(1);
});
