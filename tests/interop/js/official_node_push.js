'use strict';
// The official Node client's PushConsumer against tidemq (gRPC).
// argv: --endpoints HOST:PORT --topic T --group G --mode standard|fifo [--timeout-ms N]
// standard: 4 messages, m1 fails once -> redelivered with deliveryAttempt 2.
// fifo: groups ga/gb, a1 fails once (local retry), b1 always fails (-> DLQ).
// stdout: JSON lines; exit 0 done, 1 failed, 3 timed out.
const { emit, start } = require('./_official');
const { Producer, PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const opts = start(['mode']);

async function main() {
  const { endpoints, topic, group, mode } = opts;
  const fifo = mode === 'fifo';
  const failOnce = new Set(fifo ? ['a1'] : ['m1']);
  const failAlways = new Set(fifo ? ['b1'] : []);
  const seen = [];
  let resolveDone;
  const done = new Promise(resolve => { resolveDone = resolve; });
  const finished = () => {
    const bodies = new Set(seen.map(s => s.body));
    if (fifo) return bodies.has('a2') && bodies.has('b2');
    return seen.some(s => s.body === 'm1' && s.attempt === 2) && ['m0', 'm2', 'm3'].every(b => bodies.has(b));
  };
  const consumer = new PushConsumer({
    endpoints, namespace: '', consumerGroup: group,
    subscriptions: new Map([[topic, '*']]),
    messageListener: {
      async consume(view) {
        const body = view.body.toString();
        seen.push({ body, attempt: view.deliveryAttempt });
        emit('consumed', { body, attempt: view.deliveryAttempt, group: view.messageGroup });
        let result = ConsumeResult.SUCCESS;
        if (failAlways.has(body)) result = ConsumeResult.FAILURE;
        else if (failOnce.has(body)) { failOnce.delete(body); result = ConsumeResult.FAILURE; }
        if (finished()) setTimeout(resolveDone, 500);
        return result;
      },
    },
  });
  await consumer.startup();
  const producer = new Producer({ endpoints, namespace: '', topics: [topic] });
  await producer.startup();
  for (let i = 0; i < (fifo ? 3 : 4); i++) {
    if (fifo) {
      await producer.send({ topic, messageGroup: 'ga', body: Buffer.from(`a${i}`) });
      await producer.send({ topic, messageGroup: 'gb', body: Buffer.from(`b${i}`) });
    } else {
      await producer.send({ topic, body: Buffer.from(`m${i}`) });
    }
  }
  await done;
  emit('done', {});
  await producer.shutdown();
  process.exit(0); // the push consumer's shutdown waits a long poll; not needed here
}

main().catch(err => {
  emit('fatal', { error: String(err && err.stack || err) });
  process.exit(1);
});
