'use strict';
// The official RocketMQ 5 Node client (rocketmq-client-nodejs, gRPC) against `tidemq serve --acl`.
// argv: --endpoints HOST:PORT --topic T --group G --denied-topic D --access-key AK --secret-key SK
// With the credentials: send to T, receive with G, ack, nothing left. Without them, with a
// wrong secret, and sending to D (SUB only): the client's error (name, code, message).
// stdout: JSON lines {"event": ..., ...}; exit 0 done, 1 failed, 3 timed out.
const { emit, start } = require('./_official');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const opts = start(['denied-topic', 'access-key', 'secret-key']);

// The client wraps a startup failure ("Startup the rocketmq client failed") around the
// status exception: the innermost error with a response code is the server's answer.
function answer(err) {
  let found = err;
  for (let e = err; e; e = e.cause) {
    if (e.code !== undefined) found = e;
  }
  return { name: found.name, code: found.code, message: found.message };
}

async function refused(label, credentials, topic) {
  const producer = new Producer({
    endpoints: opts.endpoints, namespace: '', topics: [topic], maxAttempts: 1,
    sessionCredentials: credentials,
  });
  try {
    await producer.startup();
    await producer.send({ topic, body: Buffer.from(`node ${label}`) });
    emit(label, { error: null });
  } catch (err) {
    emit(label, answer(err));
  } finally {
    await producer.shutdown().catch(() => {});
  }
}

async function main() {
  const { endpoints, topic, group } = opts;
  const credentials = { accessKey: opts['access-key'], accessSecret: opts['secret-key'] };
  const producer = new Producer({
    endpoints, namespace: '', topics: [topic], sessionCredentials: credentials,
  });
  await producer.startup();
  const sent = await producer.send({ topic, body: Buffer.from('node allowed') });
  emit('sent', { messageId: sent.messageId });
  await producer.shutdown();

  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: group, sessionCredentials: credentials,
    subscriptions: new Map([[topic, '*']]), awaitDuration: 2000,
  });
  await consumer.startup();
  let mine = null;
  while (mine === null) {
    for (const view of await consumer.receive(16, 15000)) {
      await consumer.ack(view);
      if (view.messageId === sent.messageId) {
        mine = view;
        emit('received', { body: view.body.toString() });
        emit('acked', { messageId: view.messageId });
      }
    }
  }
  const left = await consumer.receive(16, 15000);
  emit('empty-after-ack', { count: left.filter(v => v.messageId === sent.messageId).length });
  await consumer.shutdown();

  await refused('anonymous', undefined, topic);
  await refused('wrong-key', { accessKey: opts['access-key'], accessSecret: 'wrongSecret1' }, topic);
  await refused('denied', credentials, opts['denied-topic']);
  emit('done');
}

main().then(() => process.exit(0), err => {
  emit('fatal', { error: String(err && err.stack || err) });
  process.exit(1);
});
