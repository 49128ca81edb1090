// KafkaJS producer + admin against a kcoord node.
// usage: node kjs_produce.js BOOTSTRAP TOPIC COUNT
// Prints one JSON line: {"created":bool,"acked":N,"offsets":[{partition,offset,high,low}...]}
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

// KafkaJS has no group-less consumer (no assign()), so read with its own cluster/broker
// layer: Metadata → leader → Fetch requests, decoded by KafkaJS itself.
async function fetchAll (kafka, topic, partitions, expected) {
  const sym = Object.getOwnPropertySymbols(kafka).find(s => String(s).includes('createCluster'))
  const cluster = kafka[sym]({})
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  const leaders = cluster.findLeaderForPartitions(topic, partitions)
  const values = []
  const next = Object.fromEntries(partitions.map(p => [p, '0']))
  const deadline = Date.now() + 20000
  while (values.length < expected && Date.now() < deadline) {
    for (const [nodeId, parts] of Object.entries(leaders)) {
      const broker = await cluster.findBroker({ nodeId })
      const resp = await broker.fetch({
        replicaId: -1, isolationLevel: 1, maxWaitTime: 200, minBytes: 1, maxBytes: 1 << 20,
        topics: [{ topic, partitions: parts.map(p => ({ partition: p, fetchOffset: next[p], maxBytes: 1 << 20 })) }]
      })
      for (const pr of resp.responses[0].partitions) {
        if (pr.errorCode !== 0) throw new Error('fetch error ' + pr.errorCode)
        for (const m of pr.messages) {
          if (BigInt(m.offset) < BigInt(next[pr.partition])) continue
          values.push(m.value.toString())
          next[pr.partition] = (BigInt(m.offset) + 1n).toString()
        }
      }
    }
  }
  await cluster.disconnect()
  return values
}

async function main () {
  const [bootstrap, topic, countStr] = process.argv.slice(2)
  const count = parseInt(countStr, 10)
  const kafka = new Kafka({ clientId: 'kjs-test', brokers: [bootstrap], logLevel: logLevel.ERROR, retry: { retries: 3 } })
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  let acked = 0
  for (let i = 0; i < count; i += 50) {
    const messages = []
    for (let j = i; j < Math.min(i + 50, count); j++) messages.push({ key: `k${j}`, value: `v${j}`, partition: j % 2 })
    const res = await producer.send({ topic, acks: -1, messages })
    acked += messages.length
    if (!res.every(r => r.errorCode === 0)) throw new Error('produce error ' + JSON.stringify(res))
  }
  await producer.disconnect()
  const offsets = await admin.fetchTopicOffsets(topic)
  await admin.disconnect()
  const fetched = await fetchAll(kafka, topic, [0, 1], count)
  console.log(JSON.stringify({ created, acked, offsets, fetched }))
}

main().catch(e => { console.error(e && e.stack ? e.stack : e); process.exit(1) })
