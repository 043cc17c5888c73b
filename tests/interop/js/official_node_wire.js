'use strict';
// What the official Node client's own integration tests (apache/rocketmq-clients
// nodejs/test/producer/Producer.test.ts) check on the wire, against tidemq:
// a send receipt's transactionId is its messageId for every message type; a
// received FIFO message keeps __SHARDINGKEY and a committed transactional one
// __transactionId__ in its properties; an unknown topic's NotFoundException
// carries RocketMQ's text.
// argv: --endpoints HOST:PORT --topic T --group G --missing NO_SUCH_TOPIC [--timeout-ms N]
// stdout: JSON lines {"event": ..., ...}; exit 0 done, 1 failed, 3 timed out.
const { emit, start } = require('./_official');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const opts = start(['missing']);

async function main() {
  const { endpoints, topic } = opts;
  const producer = new Producer({
    endpoints, namespace: '', topics: [topic], maxAttempts: 2,
    checker: { async check() { return 1; /* COMMIT */ } },
  });
  await producer.startup();
  try {
    await producer.send({ topic: opts.missing, body: Buffer.from('nowhere') });
    emit('unknown-topic', { error: null });
  } catch (err) {
    emit('unknown-topic', { name: err.name, code: err.code, message: err.message });
  }
  const receipts = {};
  const sent = async (label, message, transaction) => {
    const receipt = await producer.send(Object.assign({ topic, body: Buffer.from(label) }, message), transaction);
    receipts[label] = receipt;
    emit('sent', { label, messageId: receipt.messageId, transactionId: receipt.transactionId });
  };
  await sent('normal', { tag: 'TagA', keys: ['k0'] });
  await sent('fifo', { messageGroup: 'fifoMessageGroup' });
  await sent('delayed', { delay: 1000 });
  const transaction = producer.beginTransaction();
  await sent('committed', {}, transaction);
  await transaction.commit();

  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: opts.group,
    subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
  });
  await consumer.startup();
  const want = new Set(Object.keys(receipts));
  while (want.size > 0) {
    for (const view of await consumer.receive(16, 15000)) {
      const body = view.body.toString();
      want.delete(body);
      emit('received', {
        body, messageId: view.messageId, messageGroup: view.messageGroup || null,
        properties: Object.fromEntries(view.properties || new Map()),
      });
      await consumer.ack(view);
    }
  }
  emit('done');
  await consumer.shutdown();
  await producer.shutdown();
}

main().then(() => process.exit(0), err => {
  emit('fatal', { error: String(err && err.stack || err) });
  process.exit(1);
});
