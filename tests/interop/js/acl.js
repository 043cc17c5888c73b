'use strict';
// Scenario: ali-ons with ACL credentials (`--access-key/--secret-key`, its own
// accessKey/secretKey options; it signs every request and adds OnsChannel).
// --mode produce: sends `--count` labelled messages, one `sent` or `send_error` event
//   each (a refused send is reported, not fatal).
// --mode consume: subscribes and reports every delivery; waits for `stop`.
const c = require('./_common');

c.main({
  mode: { type: 'string', default: 'produce' },
  count: { type: 'string', default: '2' },
  'access-key': { type: 'string' },
  'secret-key': { type: 'string' },
}, async opts => {
  const credentials = { accessKey: opts['access-key'], secretKey: opts['secret-key'] };
  const signed = Object.assign({}, opts, { credentials });
  if (opts.mode === 'produce') {
    const producer = new c.Producer(Object.assign(baseOptions(signed), {
      producerGroup: `PG_${opts.group}`,
    }));
    producer.on('error', err => c.emit('client_error', Object.assign({ who: 'producer' }, describe(err))));
    await producer.ready();
    // ali-ons retries a refused send and then throws a generic error: report each
    // broker answer (its code and remark) as it comes.
    const sendKernel = producer.sendKernelImpl.bind(producer);
    producer.sendKernelImpl = async (...args) => {
      try {
        return await sendKernel(...args);
      } catch (err) {
        c.emit('refusal', describe(err));
        throw err;
      }
    };
    let sent = 0;
    for (let i = 0; i < Number(opts.count); i++) {
      try {
        await c.sendMessage(producer, { topic: opts.topic, tags: 'TagA', label: `acl-${i}` });
        sent++;
      } catch (err) {
        c.emit('send_error', Object.assign({ label: `acl-${i}` }, describe(err)));
      }
    }
    await c.closeQuietly('producer', producer, 5000);
    return { sent };
  }
  const consumer = new c.Consumer(Object.assign(baseOptions(signed), { consumerGroup: opts.group }));
  consumer.on('error', err => c.emit('client_error', Object.assign({ who: 'consumer' }, describe(err))));
  const recorder = c.deliveryRecorder('consumer');
  consumer.subscribe(opts.topic, '*', recorder.handler);
  await consumer.ready();
  c.emit('subscribed', { topic: opts.topic });
  const why = await c.stopRequested;
  await c.closeQuietly('consumer', consumer, 5000);
  return { received: recorder.deliveries.length, why };
});

function baseOptions(opts) {
  const options = {
    httpclient: {},
    nameSrv: opts.namesrv,
    logger: { debug() {}, info() {}, warn() {}, error() {} },
    pollNameServerInteval: 2000,
    heartbeatBrokerInterval: 2000,
    rebalanceInterval: 2000,
    persistConsumerOffsetInterval: 1000,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
  };
  if (opts.credentials.accessKey) {
    options.accessKey = opts.credentials.accessKey;
    options.secretKey = opts.credentials.secretKey;
  }
  return options;
}

function describe(err) {
  return { name: err && err.name, code: err && err.code, message: String(err && err.message) };
}
