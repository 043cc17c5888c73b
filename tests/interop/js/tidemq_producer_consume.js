'use strict';
// Scenario: the tidemq Python producer sends, a real ali-ons push consumer receives.
// The consumer subscribes `--expression` and reports `subscribed` once it holds all
// four queues; the test then sends from Python and says `stop` when it has seen every
// delivery it waits for (the script's hard timeout ends it otherwise).
const c = require('./_common');

c.main({ expression: { type: 'string', default: '*' } }, async opts => {
  const consumer = c.newConsumer(opts, 'consumer', { consumerGroup: opts.group });
  const recorder = c.deliveryRecorder('consumer');
  consumer.subscribe(opts.topic, opts.expression, recorder.handler);
  await consumer.ready();
  await c.waitAssigned(opts.topic, { consumer }, p => p.consumer.length === 4, opts.timeoutMs / 3);
  c.emit('subscribed', { topic: opts.topic, expression: opts.expression });
  const why = await c.stopRequested;
  await c.closeQuietly('consumer', consumer, 5000);
  return { received: recorder.deliveries.length, why };
});
