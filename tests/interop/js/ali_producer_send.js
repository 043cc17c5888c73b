'use strict';
// Scenario: an ali-ons producer sends a few labelled messages for a tidemq push
// consumer (the test's Python side): tags (one not subscribed), keys, user
// properties, the user flag, and a body over 4 KiB that ali-ons compresses.
// Each send is reported as a `sent` event with the original body's fields.
const crypto = require('crypto');
const c = require('./_common');

function bigBody() {
  const parts = [];
  let block = Buffer.from('ali-ons to tidemq');
  let size = 0;
  while (size < 6000) {
    block = crypto.createHash('sha256').update(block).digest();
    parts.push(block);
    size += block.length;
  }
  return Buffer.concat(parts).subarray(0, 6000);
}

c.main({}, async opts => {
  const producer = await c.startProducer(opts, `PG_${opts.group}`);
  await c.sendMessage(producer, {
    topic: opts.topic, tags: 'TagA', label: 'plain', body: 'hello from ali-ons',
    keys: ['k1', 'k2'], flag: 3, properties: { color: 'red', spaced: 'a value with spaces' },
  });
  await c.sendMessage(producer, {
    topic: opts.topic, tags: 'TagZip', label: 'zip', body: bigBody(), keys: ['big'],
  });
  await c.sendMessage(producer, {
    topic: opts.topic, tags: 'TagSkip', label: 'skip', body: 'not subscribed',
  });
  await c.sendMessage(producer, {
    topic: opts.topic, tags: 'TagA', label: 'last', body: 'the end',
  });
  await c.closeQuietly('producer', producer, 5000);
  return { sent: 4 };
});
