'use strict';
// Scenario: produce/consume with a tag subscription.
// A consumer subscribed `TagA || TagC` gets every TagA/TagC message exactly once and
// never a TagB one. Six messages (B, A, C, B, A, C) go to one queue through a sharding
// key, so when the last TagC has been handled every earlier TagB of that queue would
// have been too (ali-ons handles a queue in offset order); four more TagA/TagC go round
// robin over the four queues.
const c = require('./_common');

c.main({}, async opts => {
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const consumer = c.newConsumer(opts, 'consumer', { consumerGroup: opts.group });
  const recorder = c.deliveryRecorder('consumer');
  consumer.subscribe(opts.topic, 'TagA || TagC', recorder.handler);
  await consumer.ready();
  await c.waitAssigned(opts.topic, { consumer }, p => p.consumer.length === 4, opts.timeoutMs / 3);

  const shardingKey = c.shardingKeyAvoidingQueue0(opts.topic, 4);
  const plan = [
    ['b1', 'TagB', shardingKey], ['a1', 'TagA', shardingKey], ['c1', 'TagC', shardingKey],
    ['b2', 'TagB', shardingKey], ['a2', 'TagA', shardingKey], ['c2', 'TagC', shardingKey],
    ['a3', 'TagA', null], ['c3', 'TagC', null], ['a4', 'TagA', null], ['c4', 'TagC', null],
  ];
  for (const [label, tags, key] of plan) {
    await c.sendMessage(producer, { topic: opts.topic, tags, label, shardingKey: key });
  }
  const wanted = plan.filter(([, tags]) => tags !== 'TagB').map(([label]) => label);
  await c.waitFor('every TagA/TagC message', () => {
    const seen = new Set(recorder.deliveries.map(d => d.label));
    return wanted.every(label => seen.has(label));
  }, opts.timeoutMs / 3);

  await c.closeQuietly('consumer', consumer, 5000);
  await c.closeQuietly('producer', producer, 5000);
  return { received: recorder.deliveries.length };
});
