'use strict';
// The official RocketMQ 5 Node client (rocketmq-client-nodejs, gRPC) against tidemq.
// argv: --endpoints HOST:PORT --topic T --group G [--timeout-ms N]
// stdout: JSON lines {"event": ..., ...}; exit 0 done, 1 failed, 3 timed out.
const { emit, start } = require('./_official');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const opts = start();

const COMMIT = 1;
const ROLLBACK = 2;

async function main() {
  const endpoints = opts.endpoints;
  const topic = opts.topic;
  const checked = [];
  const producer = new Producer({
    endpoints, namespace: '', topics: [topic],
    checker: { async check(view) { checked.push(view.body.toString()); return COMMIT; } },
  });
  await producer.startup();
  const sent = await producer.send({
    topic, tag: 'TagA', keys: ['k0'], properties: new Map([['p', 'v']]), body: Buffer.from('normal'),
  });
  emit('sent', { label: 'normal', messageId: sent.messageId });
  for (let i = 0; i < 3; i++) {
    await producer.send({ topic, messageGroup: 'order-1', body: Buffer.from(`fifo-${i}`) });
  }
  const delayedAt = Date.now() + 2000;
  await producer.send({ topic, body: Buffer.from('delayed'), deliveryTimestamp: new Date(delayedAt) });
  const recalled = await producer.send({ topic, body: Buffer.from('recalled'), delay: 2000 });
  await producer.recallMessage(topic, recalled.recallHandle);
  emit('recalled', { handle: recalled.recallHandle });
  const tx1 = producer.beginTransaction();
  await producer.send({ topic, body: Buffer.from('committed') }, tx1);
  await tx1.commit();
  const tx2 = producer.beginTransaction();
  await producer.send({ topic, body: Buffer.from('rolled-back') }, tx2);
  await tx2.rollback();
  const tx3 = producer.beginTransaction();
  await producer.send({ topic, body: Buffer.from('orphan') }, tx3);

  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: opts.group,
    subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
  });
  await consumer.startup();
  const want = new Set(['normal', 'fifo-0', 'fifo-1', 'fifo-2', 'delayed', 'committed', 'orphan']);
  const got = [];
  let redelivered = null;
  let changed = false;
  while (got.length < want.size || redelivered === null) {
    const views = await consumer.receive(16, 15000);
    for (const view of views) {
      const body = view.body.toString();
      const fields = {
        body, tag: view.tag, keys: view.keys, attempt: view.deliveryAttempt,
        group: view.messageGroup, corrupted: view.corrupted === true,
        properties: Object.fromEntries(view.properties || new Map()),
        delivery: view.deliveryTimestamp ? view.deliveryTimestamp.getTime() : null,
      };
      emit('received', fields);
      if (body === 'normal' && !changed) {
        changed = true;
        await consumer.changeInvisibleDuration(view, 1000); // comes back, attempt 2
        got.push(body);
        continue;
      }
      if (body === 'normal') redelivered = view.deliveryAttempt;
      else got.push(body);
      await consumer.ack(view);
    }
  }
  emit('done', { checked, delayedAt });
  await consumer.shutdown();
  await producer.shutdown();
}

main().then(() => process.exit(0), err => {
  emit('fatal', { error: String(err && err.stack || err) });
  process.exit(1);
});
