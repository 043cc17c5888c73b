'use strict';
// Scenario: two consumers of one group (instanceName c1, c2) split the four queues
// 2/2, and every message is consumed exactly once overall.
const c = require('./_common');

c.main({ count: { type: 'string', default: '16' } }, async opts => {
  const count = Number(opts.count);
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  const consumers = {};
  const recorders = {};
  for (const who of ['c1', 'c2']) {
    consumers[who] = c.newConsumer(opts, who, { consumerGroup: opts.group, instanceName: who });
    recorders[who] = c.deliveryRecorder(who);
    consumers[who].subscribe(opts.topic, '*', recorders[who].handler);
    await consumers[who].ready();
  }
  await c.waitAssigned(opts.topic, consumers, p => {
    const all = [...p.c1, ...p.c2].sort((a, b) => a - b);
    return p.c1.length === 2 && p.c2.length === 2 && JSON.stringify(all) === '[0,1,2,3]';
  }, opts.timeoutMs / 2);

  const labels = [];
  for (let i = 0; i < count; i++) {
    labels.push(`lb-${i}`);
    await c.sendMessage(producer, { topic: opts.topic, tags: 'TagL', label: `lb-${i}` });
  }
  await c.waitFor('every message', () => {
    const seen = new Set([...recorders.c1.deliveries, ...recorders.c2.deliveries].map(d => d.label));
    return labels.every(label => seen.has(label));
  }, opts.timeoutMs / 4);

  for (const who of ['c1', 'c2']) {
    await c.closeQuietly(who, consumers[who], 5000);
  }
  await c.closeQuietly('producer', producer, 5000);
  return { c1: recorders.c1.deliveries.length, c2: recorders.c2.deliveries.length };
});
