'use strict';
// Scenario: CONSUME_FROM_TIMESTAMP for a new group.
// --count messages are sent ("before"), the clock is let pass the next whole second T,
// --count more are sent ("after"), then a consumer of a new group starts with
// consumeFromWhere CONSUME_FROM_TIMESTAMP and consumeTimestamp = T (YYYYMMDDHHmmss,
// local time): it must get the "after" messages only.
const c = require('./_common');

c.main({ count: { type: 'string', default: '4' } }, async opts => {
  const count = Number(opts.count);
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  for (let i = 0; i < count; i++) {
    await c.sendMessage(producer, { topic: opts.topic, tags: 'TagT', label: `before-${i}` });
  }
  const boundary = (Math.floor(Date.now() / 1000) + 1) * 1000;
  await c.waitFor('the clock to pass the boundary second', () => Date.now() >= boundary + 50, 3000);
  const consumeTimestamp = c.humanTime(boundary);
  c.emit('boundary', { boundaryMs: boundary, consumeTimestamp });
  const labels = [];
  for (let i = 0; i < count; i++) {
    labels.push(`after-${i}`);
    await c.sendMessage(producer, { topic: opts.topic, tags: 'TagT', label: `after-${i}` });
  }

  const consumer = c.newConsumer(opts, 'consumer', {
    consumerGroup: opts.group, consumeFromWhere: 'CONSUME_FROM_TIMESTAMP', consumeTimestamp,
  });
  const recorder = c.deliveryRecorder('consumer');
  consumer.subscribe(opts.topic, '*', recorder.handler);
  await consumer.ready();
  await c.waitAssigned(opts.topic, { consumer }, p => p.consumer.length === 4, opts.timeoutMs / 3);
  await c.waitFor('the "after" messages', () => {
    const seen = new Set(recorder.deliveries.map(d => d.label));
    return labels.every(label => seen.has(label));
  }, opts.timeoutMs / 3);

  await c.closeQuietly('consumer', consumer, 5000);
  await c.closeQuietly('producer', producer, 5000);
  return { received: recorder.deliveries.length };
});
