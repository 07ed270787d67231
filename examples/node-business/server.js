#!/usr/bin/env node
// An OnceGuard business container in Node.js (push mode).
//
// Serves onceguard.v1.MessageHandler/Handle from the repository's proto contract, appends every
// delivery it receives to a JSON-lines file, and answers OK, or REJECT / RETRY when the record
// asks for it (test and demo knobs, see README.md). Prints "listening on <port>" once bound.
//
//   node server.js --port 9001 --out deliveries.jsonl
//
// Settings (a flag wins over the environment variable):
//   --host    ONCEGUARD_BUSINESS_HOST   address to bind                     127.0.0.1
//   --port    ONCEGUARD_BUSINESS_PORT   port; 0 picks a free one            9001
//   --out     ONCEGUARD_BUSINESS_OUT    JSON-lines file, appended to        deliveries.jsonl
//   --proto   ONCEGUARD_PROTO           the contract's onceguard.proto      ../../proto/src/main/proto/onceguard/v1/onceguard.proto
//             ONCEGUARD_REJECT_FIELD    value field that, when true, makes the business REJECT ("" = never)   reject
//             ONCEGUARD_RETRY_FIELD     value field N: answer RETRY to attempts 1..N ("" = never)          retry_times
//             ONCEGUARD_DELAY_FIELD     value field N: wait N ms before answering ("" = never)             delay_ms
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const USAGE = `usage: node server.js [--host H] [--port P] [--out FILE] [--proto FILE]
  --host   (ONCEGUARD_BUSINESS_HOST, default 127.0.0.1)
  --port   (ONCEGUARD_BUSINESS_PORT, default 9001; 0 picks a free port, printed as "listening on <port>")
  --out    (ONCEGUARD_BUSINESS_OUT, default deliveries.jsonl) JSON lines, one per delivery received
  --proto  (ONCEGUARD_PROTO) the onceguard.proto contract, default: the repository's copy
knobs: ONCEGUARD_REJECT_FIELD (reject), ONCEGUARD_RETRY_FIELD (retry_times), ONCEGUARD_DELAY_FIELD (delay_ms)
`;

function parseArgs(argv) {
  const flags = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m) {
      fail(`unexpected argument '${a}' (flags: --host, --port, --out, --proto)`);
    }
    if (m[1] === 'help') {
      process.stdout.write(USAGE);
      process.exit(0);
    }
    let v = m[2];
    if (v === undefined) {
      if (i + 1 >= argv.length) {
        fail(`--${m[1]} needs a value`);
      }
      v = argv[++i];
    }
    flags[m[1]] = v;
  }
  for (const k of Object.keys(flags)) {
    if (!['host', 'port', 'out', 'proto'].includes(k)) {
      fail(`unknown flag --${k} (flags: --host, --port, --out, --proto)`);
    }
  }
  return flags;
}

function fail(msg) {
  process.stderr.write(`node-business: ${msg}\n`);
  process.exit(2);
}

function env(name, def) {
  const v = process.env[name];
  return v === undefined ? def : v;
}

function setting(flags, flag, envName, def) {
  return flags[flag] !== undefined ? flags[flag] : env(envName, def);
}

const flags = parseArgs(process.argv.slice(2));
const host = setting(flags, 'host', 'ONCEGUARD_BUSINESS_HOST', '127.0.0.1');
const portText = setting(flags, 'port', 'ONCEGUARD_BUSINESS_PORT', '9001');
const outFile = path.resolve(setting(flags, 'out', 'ONCEGUARD_BUSINESS_OUT', 'deliveries.jsonl'));
const protoFile = path.resolve(setting(flags, 'proto', 'ONCEGUARD_PROTO',
  path.join(__dirname, '..', '..', 'proto', 'src', 'main', 'proto', 'onceguard', 'v1', 'onceguard.proto')));
const rejectField = env('ONCEGUARD_REJECT_FIELD', 'reject');
const retryField = env('ONCEGUARD_RETRY_FIELD', 'retry_times');
const delayField = env('ONCEGUARD_DELAY_FIELD', 'delay_ms');

if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
  fail(`port '${portText}' is not a TCP port (0 picks a free one)`);
}
if (!fs.existsSync(protoFile)) {
  fail(`contract not found at ${protoFile} (set ONCEGUARD_PROTO or --proto)`);
}

// keepCase: the JSON lines use the contract's field names (entity_id, dedup_key, ...).
// longs as strings: offsets and timestamps are int64 and must not lose precision.
const definition = protoLoader.loadSync(protoFile, {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [path.resolve(path.dirname(protoFile), '..', '..')],
});
const onceguard = grpc.loadPackageDefinition(definition).onceguard.v1;

const out = fs.openSync(outFile, 'a');

/** Bytes as UTF-8 text; null when the field is absent (null key, tombstone, null header value). */
function text(msg, field) {
  // proto3 `optional`: presence is reported through the synthetic oneof "_<field>"
  if (!msg || msg[`_${field}`] !== field) {
    return null;
  }
  return Buffer.from(msg[field]).toString('utf8');
}

/** An int64 (a decimal string from the loader) as a JSON number when exact, else as the string. */
function int64(s) {
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : String(s);
}

function parseJson(s) {
  if (s === null) {
    return null;
  }
  try {
    const v = JSON.parse(s);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch (e) {
    return null;
  }
}

/** What to answer, from the record's own knobs. */
function decide(d, value) {
  if (rejectField && value && value[rejectField] === true) {
    const why = typeof value.reject_reason === 'string' ? value.reject_reason : `'${rejectField}' is set`;
    const what = [d.entity_id, d.event].filter((s) => s).join(' ') || 'record';
    return { outcome: 'REJECT', message: `refused ${what}: ${why}` };
  }
  if (retryField && value && Number.isInteger(value[retryField]) && d.attempt <= value[retryField]) {
    return { outcome: 'RETRY', message: `not ready (attempt ${d.attempt} of ${value[retryField]} refused)` };
  }
  return { outcome: 'OK', message: 'applied' };
}

let handled = 0;

function handle(call, callback) {
  const d = call.request;
  const r = d.record || {};
  const valueText = text(r, 'value');
  const value = parseJson(valueText);
  const answer = decide(d, value);
  const line = {
    received_at: new Date().toISOString(),
    route: d.route,
    topic: r.topic,
    partition: r.partition,
    offset: int64(r.offset),
    timestamp_ms: int64(r.timestamp_ms),
    key: text(r, 'key'),
    value: valueText,
    headers: (r.headers || []).map((h) => ({ key: h.key, value: text(h, 'value') })),
    entity_id: d.entity_id,
    event: d.event,
    from_state: d.from_state,
    to_state: d.to_state,
    dedup_key: d.dedup_key,
    business_key: d.business_key,
    attempt: d.attempt,
    redelivery: d.redelivery,
    delivery_id: d.delivery_id,
    outcome: answer.outcome,
    message: answer.message,
  };
  // written before answering: once the sidecar confirms, the line is already on disk
  fs.writeSync(out, JSON.stringify(line) + '\n');
  handled++;
  const delay = delayField && value && Number.isInteger(value[delayField]) ? Math.max(0, value[delayField]) : 0;
  const reply = () => callback(null, { outcome: answer.outcome, message: answer.message, retry_after_ms: 0 });
  if (delay > 0) {
    setTimeout(reply, delay);
  } else {
    reply();
  }
}

const server = new grpc.Server();
server.addService(onceguard.MessageHandler.service, { Handle: handle });
server.bindAsync(`${host}:${portText}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err) {
    fail(`cannot listen on ${host}:${portText}: ${err.message}`);
  }
  process.stdout.write(`listening on ${port}\n`);
  process.stderr.write(`node-business: serving onceguard.v1.MessageHandler on ${host}:${port}, deliveries -> ${outFile}\n`);
});

let stopping = false;
function stop(signal) {
  if (stopping) {
    return;
  }
  stopping = true;
  process.stderr.write(`node-business: ${signal}, shutting down after ${handled} deliveries\n`);
  // in-flight calls get a moment to answer; then whatever is left is cut off
  const force = setTimeout(() => server.forceShutdown(), 3000);
  force.unref();
  server.tryShutdown(() => {
    fs.closeSync(out);
    process.exit(0);
  });
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
