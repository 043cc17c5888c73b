'use strict';
// Shared plumbing for the ali-ons interop scenario scripts (CommonJS, Node >= 18).
//
// Contract with tests/interop (Python):
// * `require('ali-ons')` is resolved through NODE_PATH=<repo>/interop/node_modules.
// * Options come from argv (`--namesrv HOST:PORT --topic T --group G ...`); the name
//   server falls back to $TIDEMQ_NAMESRV.
// * stdout carries only JSON lines, one event each: `{"event": "...", "t": <ms>, ...}`.
//   ali-ons' own log lines go to stderr.
// * stdin carries commands, one a line; `stop` (or end of input, i.e. the test went
//   away) ends a script that waits for it.
// * Every script has a hard timeout (`--timeout-ms`) and always ends with
//   process.exit(): 0 done, 1 failed (`fatal` event), 3 timed out (`timeout` event).
//   ali-ons keeps an internal producer open, so the process never ends by itself.

const crypto = require('crypto');
const { parseArgs } = require('util');

let ons;
try {
  ons = require('ali-ons');
} catch (err) {
  process.stdout.write(JSON.stringify({
    event: 'fatal',
    t: Date.now(),
    error: `cannot load ali-ons (${err.message}); run \`make test\` to install interop/node_modules`,
  }) + '\n');
  process.exit(1);
}
const onsUtils = require('ali-ons/lib/utils');

const { Producer, Consumer, Message } = ons;

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event, t: Date.now() }, fields || {})) + '\n');
}

const COMMON_OPTIONS = {
  namesrv: { type: 'string' },
  topic: { type: 'string' },
  group: { type: 'string' },
  'timeout-ms': { type: 'string', default: '60000' },
};

function parseOptions(extra) {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: Object.assign({}, COMMON_OPTIONS, extra || {}),
    strict: true,
  });
  values.namesrv = values.namesrv || process.env.TIDEMQ_NAMESRV;
  if (!values.namesrv) {
    throw new Error('--namesrv HOST:PORT (or $TIDEMQ_NAMESRV) is required');
  }
  values.timeoutMs = Number(values['timeout-ms']);
  return values;
}

const verbose = !!process.env.TIDEMQ_INTEROP_VERBOSE;
function stderrLog(level) {
  return (...args) => {
    process.stderr.write(`[ali-ons ${level}] ${require('util').format(...args)}\n`);
  };
}
const logger = {
  debug: verbose ? stderrLog('debug') : () => {},
  info: verbose ? stderrLog('info') : () => {},
  warn: stderrLog('warn'),
  error: stderrLog('error'),
};

// The fast timers of protocol-remoting.md §3.3; every client of one process gets the
// same values because clients with the same clientId share one MQClient (§6.1).
function baseOptions(opts) {
  return {
    httpclient: {},
    nameSrv: opts.namesrv,
    logger,
    pollNameServerInteval: 2000,
    heartbeatBrokerInterval: 2000,
    rebalanceInterval: 2000,
    persistConsumerOffsetInterval: 1000,
  };
}

function describeError(err) {
  if (!err || typeof err !== 'object') {
    return { name: typeof err, message: String(err) };
  }
  return { name: err.name, code: err.code, message: err.message };
}

function watchErrors(who, emitter) {
  emitter.on('error', err => emit('client_error', Object.assign({ who }, describeError(err))));
}

async function startProducer(opts, group) {
  const producer = new Producer(Object.assign(baseOptions(opts), { producerGroup: group }));
  watchErrors('producer', producer);
  await producer.ready();
  return producer;
}

function newConsumer(opts, who, extra) {
  const consumer = new Consumer(Object.assign(baseOptions(opts), extra));
  watchErrors(who, consumer);
  return consumer;
}

// User properties only: the system ones (TAGS, KEYS, retry bookkeeping, MIN/MAX_OFFSET
// added by the client) are reported as fields of their own.
const SYSTEM_PROPERTIES = new Set([
  '', 'TAGS', 'KEYS', 'MIN_OFFSET', 'MAX_OFFSET', 'ORIGIN_MESSAGE_ID', 'RETRY_TOPIC',
  'REAL_TOPIC', 'REAL_QID', 'DELAY', 'WAIT', 'CLUSTER', 'UNIQ_KEY', 'RECONSUME_TIME',
  'MAX_RECONSUME_TIMES', '__SHARDING_KEY', 'MSG_REGION', 'TRACE_ON',
]);

function userProperties(props) {
  const out = {};
  for (const [key, value] of Object.entries(props || {})) {
    if (!SYSTEM_PROPERTIES.has(key)) {
      out[key] = value;
    }
  }
  return out;
}

function bodyFields(body) {
  const buf = body ? Buffer.from(body) : Buffer.alloc(0);
  return {
    bodyLength: buf.length,
    bodySha256: crypto.createHash('sha256').update(buf).digest('hex'),
    body: buf.length <= 256 ? buf.toString('utf8') : null,
    bodyB64: buf.toString('base64'),
  };
}

function messageFields(msg) {
  const props = msg.properties || {};
  return Object.assign({
    msgId: msg.msgId,
    topic: msg.topic,
    tags: msg.tags === undefined ? null : msg.tags,
    keys: msg.keys === undefined ? null : msg.keys,
    queueId: msg.queueId,
    queueOffset: msg.queueOffset,
    commitLogOffset: msg.commitLogOffset,
    reconsumeTimes: msg.reconsumeTimes,
    originMessageId: msg.originMessageId === undefined ? null : msg.originMessageId,
    retryTopic: msg.retryTopic === undefined ? null : msg.retryTopic,
    flag: msg.flag,
    sysFlag: msg.sysFlag,
    bornHost: msg.bornHost,
    storeHost: msg.storeHost,
    bornTimestamp: msg.bornTimestamp,
    storeTimestamp: msg.storeTimestamp,
    realTopic: props.REAL_TOPIC === undefined ? null : props.REAL_TOPIC,
    // the broker's send stamp (MSG_REGION, TRACE_ON), as stored
    msgRegion: props.MSG_REGION === undefined ? null : props.MSG_REGION,
    traceOn: props.TRACE_ON === undefined ? null : props.TRACE_ON,
    properties: userProperties(props),
  }, bodyFields(msg.body));
}

// `label` is a test-chosen name carried in the user property `label`, so the test
// can match sends and deliveries without relying on bodies.
async function sendMessage(producer, spec) {
  const body = spec.body === undefined ? `body of ${spec.label}` : spec.body;
  const msg = new Message(spec.topic, spec.tags, body);
  const original = bodyFields(msg.body); // the producer compresses msg.body in place
  if (spec.keys) {
    msg.keys = spec.keys;
  }
  if (spec.flag !== undefined) {
    msg.flag = spec.flag;
  }
  if (spec.shardingKey) {
    msg.shardingKey = spec.shardingKey;
  }
  Object.assign(msg.properties, spec.properties || {}, { label: spec.label });
  const result = await producer.send(msg);
  const sent = Object.assign({
    label: spec.label,
    tags: spec.tags,
    keys: spec.keys ? spec.keys.join(' ') : null,
    flag: spec.flag === undefined ? 0 : spec.flag,
    sendStatus: result.sendStatus,
    msgId: result.msgId,
    topic: result.messageQueue.topic,
    brokerName: result.messageQueue.brokerName,
    queueId: Number(result.messageQueue.queueId),
    queueOffset: result.queueOffset,
  }, original);
  emit('sent', sent);
  return sent;
}

function deliveryRecorder(who, handler) {
  const deliveries = [];
  const fn = async msg => {
    const fields = Object.assign({ who }, messageFields(msg));
    fields.label = fields.properties.label === undefined ? null : fields.properties.label;
    deliveries.push(fields);
    emit('received', fields);
    if (handler) {
      await handler(msg, fields);
    }
  };
  return { deliveries, handler: fn };
}

// Queue ids the consumer currently pulls for `topic` (its rebalance result, only
// counting queues whose start offset is already computed).
function assignedQueues(consumer, topic) {
  const ids = [];
  for (const item of consumer.processQueueTable.values()) {
    if (item && item.messageQueue.topic === topic) {
      ids.push(Number(item.messageQueue.queueId));
    }
  }
  return ids.sort((a, b) => a - b);
}

function sleep(ms) {
  return new Promise(resolve => setTimeout(resolve, ms));
}

// The predicate is only evaluated between macrotasks, so ali-ons' bookkeeping that
// follows a handler's return (offset update, process-queue removal: microtasks of the
// same turn) is complete whenever a delivery recorded by the handler is seen.
async function waitFor(what, predicate, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await sleep(0);
    const value = predicate();
    if (value) {
      return value;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(20);
  }
}

// Waits until every consumer has the queues `expected(consumers)` says, emitting an
// `assigned` event each time the picture changes.
async function waitAssigned(topic, consumers, expected, timeoutMs) {
  let last = '';
  return waitFor(`queue assignment of ${topic}`, () => {
    const picture = {};
    for (const [who, consumer] of Object.entries(consumers)) {
      picture[who] = assignedQueues(consumer, topic);
    }
    const text = JSON.stringify(picture);
    if (text !== last) {
      last = text;
      emit('assigned', { topic, queues: picture });
    }
    return expected(picture) ? picture : null;
  }, timeoutMs);
}

// ali-ons' tag-sharded queue choice is `queueIds[md5(key) % n] || ''`, so a key that
// hashes to queue 0 silently falls back to round robin: pick one that does not.
function shardingKeyAvoidingQueue0(prefix, queueCount) {
  for (let i = 0; ; i++) {
    const key = `${prefix}-${i}`;
    const index = crypto.createHash('md5').update(key).digest().readUInt32BE() % queueCount;
    if (index !== 0) {
      return key;
    }
  }
}

let stopResolve;
const stopRequested = new Promise(resolve => { stopResolve = resolve; });
let stdinBuffer = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', chunk => {
  stdinBuffer += chunk;
  let nl;
  while ((nl = stdinBuffer.indexOf('\n')) >= 0) {
    const line = stdinBuffer.slice(0, nl).trim();
    stdinBuffer = stdinBuffer.slice(nl + 1);
    if (line === 'stop') {
      stopResolve('stop');
    }
  }
});
process.stdin.on('end', () => stopResolve('stdin closed'));

// Closing a consumer commits its in-memory offsets, so first let it finish the
// messages it has already pulled (a consumer whose handler keeps failing never does).
async function consumerIdle(consumer, timeoutMs) {
  await waitFor('the consumer to finish its pulled messages', () => {
    for (const item of consumer.processQueueTable.values()) {
      if (item && item.processQueue.msgCount > 0) {
        return false;
      }
    }
    return true;
  }, timeoutMs);
}

async function closeQuietly(who, client, timeoutMs) {
  try {
    if (client instanceof Consumer) {
      await consumerIdle(client, timeoutMs);
    }
    await Promise.race([
      client.close(),
      sleep(timeoutMs).then(() => { throw new Error(`close() did not resolve within ${timeoutMs} ms`); }),
    ]);
    emit('closed', { who, ok: true });
    return true;
  } catch (err) {
    emit('closed', Object.assign({ who, ok: false }, describeError(err)));
    return false;
  }
}

// Runs `scenario(opts)`; always ends the process.
function main(extraOptions, scenario) {
  let opts;
  try {
    opts = parseOptions(extraOptions);
  } catch (err) {
    emit('fatal', { error: `bad arguments: ${err.message}` });
    process.exit(1);
  }
  setTimeout(() => {
    emit('timeout', { afterMs: opts.timeoutMs });
    process.exit(3);
  }, opts.timeoutMs);
  process.on('unhandledRejection', err => emit('client_error', Object.assign({ who: 'unhandledRejection' }, describeError(err))));
  emit('start', { script: require('path').basename(process.argv[1]), pid: process.pid, options: opts });
  scenario(opts).then(
    summary => {
      emit('done', summary || {});
      process.exit(0);
    },
    err => {
      emit('fatal', { error: err && err.stack ? err.stack : String(err) });
      process.exit(1);
    });
}

module.exports = {
  Consumer,
  Message,
  Producer,
  assignedQueues,
  closeQuietly,
  deliveryRecorder,
  emit,
  humanTime: onsUtils.timeMillisToHumanString,
  main,
  newConsumer,
  sendMessage,
  shardingKeyAvoidingQueue0,
  sleep,
  startProducer,
  stopRequested,
  waitAssigned,
  waitFor,
};
