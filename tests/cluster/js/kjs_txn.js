// KafkaJS transactions against kcoord: one aborted and one committed transaction, the committed
// one with consumer offsets in it (sendOffsets).
// usage: node kjs_txn.js BOOTSTRAP TOPIC GROUP
// Prints one JSON line: {"aborted":N,"committed":N}
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

async function main () {
  const [bootstrap, topic, group] = process.argv.slice(2)
  const kafka = new Kafka({ clientId: 'kjs-txn', brokers: bootstrap.split(','), logLevel: logLevel.ERROR })
  const producer = kafka.producer({ transactionalId: 'kjs-txn', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  const messages = label => Array.from({ length: 10 }, (_, i) => ({ key: String(i), value: `${label}-${i}` }))

  const aborted = await producer.transaction()
  await aborted.send({ topic, messages: messages('kjs-aborted') })
  await aborted.abort()

  const committed = await producer.transaction()
  await committed.send({ topic, messages: messages('kjs-committed') })
  await committed.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: '7' }] }] })
  await committed.commit()
  await producer.disconnect()
  console.log(JSON.stringify({ aborted: 10, committed: 10 }))
}

main().catch(e => { console.error(e); process.exit(1) })
