// kafkajs's admin client against a Kafka endpoint: `node admin.js <bootstrap> <ops.json>`.
//
// <ops.json> is a JSON array of steps, each {"op": <admin method>, "args": <its one argument>},
// run in order on one connected admin client. Prints one JSON array with a result per step:
// {"ok": <what the method returned>} or {"error": {"name", "type", "code", "items", "message"}} (a
// failed step does not stop the others; an error carries Kafka's error type and code as kafkajs saw
// them, and per-item errors in `items`). Exits non-zero only when the client cannot connect or the arguments are wrong.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const OPS = new Set([
  'listTopics', 'createTopics', 'deleteTopics', 'createPartitions', 'fetchTopicMetadata',
  'describeCluster', 'describeConfigs', 'alterConfigs',
])

function errorOf (err) {
  // Retries end in KafkaJSNumberOfRetriesExceeded, whose cause is the Kafka error; per-item
  // failures (createTopics) come as an aggregate of errors naming their topic.
  let root = err
  while (root.cause) root = root.cause
  const items = (root.errors || []).map((e) => ({ topic: e.topic ?? null, type: e.type ?? null, code: e.code ?? null }))
  return { name: err.name, type: root.type ?? null, code: root.code ?? null, items, message: err.message }
}

async function main () {
  const [bootstrap, opsPath] = process.argv.slice(2)
  if (!bootstrap || !opsPath) {
    console.error('usage: node admin.js <bootstrap host:port[,host:port...]> <ops.json>')
    process.exit(2)
  }
  const steps = JSON.parse(fs.readFileSync(opsPath, 'utf8'))
  for (const step of steps) {
    if (!OPS.has(step.op)) {
      console.error(`unknown op ${JSON.stringify(step.op)}; known: ${[...OPS].join(', ')}`)
      process.exit(2)
    }
  }
  const kafka = new Kafka({
    clientId: 'raftmeta-kafkajs-check',
    brokers: bootstrap.split(','),
    // kafkajs logs to stdout by default; its errors go to stderr so stdout stays one JSON document.
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, label, log }) => {
      console.error(JSON.stringify({ level: label, namespace, ...log }))
    },
    retry: { retries: 3 },
  })
  const admin = kafka.admin()
  await admin.connect()
  const results = []
  try {
    for (const step of steps) {
      try {
        const value = await admin[step.op](step.args)
        results.push({ ok: value === undefined ? null : value })
      } catch (err) {
        results.push({ error: errorOf(err) })
      }
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify(results) + '\n')
}

main().catch((err) => {
  console.error(`kafkajs admin failed: ${err.stack || err}`)
  process.exit(1)
})
