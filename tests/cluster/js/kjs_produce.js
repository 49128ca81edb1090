// KafkaJS producer + admin against a kcoord node.
// usage: node kjs_produce.js BOOTSTRAP TOPIC COUNT
// Prints one JSON line: {"created":bool,"acked":N,"offsets":[{partition,offset,high,low}...]}
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

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
  console.log(JSON.stringify({ created, acked, offsets }))
}

main().catch(e => { console.error(e && e.stack ? e.stack : e); process.exit(1) })
