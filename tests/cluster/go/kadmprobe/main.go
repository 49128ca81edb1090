// kadmprobe drives a cluster with franz-go's admin client (kadm) and a kgo consumer group, and
// prints each outcome as one "step<TAB>value" line (tests/cluster/test_franz_go.py reads them).
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const topic = "kadm-t"

func out(step string, value any) { fmt.Printf("%s\t%v\n", step, value) }

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func main() {
	seeds := strings.Split(os.Args[1], ",")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	must(err, "client")
	defer cl.Close()
	adm := kadm.NewClient(cl)

	brokers, err := adm.ListBrokers(ctx)
	must(err, "ListBrokers")
	out("brokers", len(brokers))

	created, err := adm.CreateTopics(ctx, 3, 3, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, topic)
	must(err, "CreateTopics")
	out("create", created[topic].Err)

	topics, err := adm.ListTopics(ctx, topic)
	must(err, "ListTopics")
	out("partitions", len(topics[topic].Partitions))

	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	must(err, "DescribeTopicConfigs")
	rc, err := configs.On(topic, nil)
	must(err, "DescribeTopicConfigs.On")
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" || c.Key == "cleanup.policy" {
			out("config."+c.Key, fmt.Sprintf("%s|%s", c.MaybeValue(), c.Source))
		}
	}

	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")}}, topic)
	must(err, "AlterTopicConfigs")
	out("alter", altered[0].Err)
	// Another node may describe it before it applied the change (as a Kafka broker may before
	// the controller's record reaches it): asked again for a while, the last answer reported.
	seen := ""
	for try := 0; try < 50 && seen != "7200000"; try++ {
		if try > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		configs, err = adm.DescribeTopicConfigs(ctx, topic)
		must(err, "DescribeTopicConfigs")
		rc, _ = configs.On(topic, nil)
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				seen = c.MaybeValue()
			}
		}
	}
	out("altered.retention.ms", seen)

	grown, err := adm.UpdatePartitions(ctx, 4, topic)
	must(err, "UpdatePartitions")
	out("grow", grown[topic].Err)

	// 20 records into partition 0
	p, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	must(err, "producer")
	for i := 0; i < 20; i++ {
		must(p.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprint(i))}).FirstErr(), "produce")
	}
	p.Close()

	ends, err := adm.ListEndOffsets(ctx, topic)
	must(err, "ListEndOffsets")
	e, _ := ends.Lookup(topic, 0)
	out("end.0", e.Offset)

	toDelete := kadm.Offsets{}
	toDelete.Add(kadm.Offset{Topic: topic, Partition: 0, At: 8})
	deleted, err := adm.DeleteRecords(ctx, toDelete)
	must(err, "DeleteRecords")
	d, _ := deleted.Lookup(topic, 0)
	out("deleted.low", fmt.Sprintf("%d|%v", d.LowWatermark, d.Err))
	starts, err := adm.ListStartOffsets(ctx, topic)
	must(err, "ListStartOffsets")
	s, _ := starts.Lookup(topic, 0)
	out("start.0", s.Offset)

	// a consumer group reads and commits
	g, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("kadm-g"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	must(err, "group client")
	got := 0
	for got < 12 {
		fetches := g.PollFetches(ctx)
		must(ctx.Err(), "poll")
		fetches.EachRecord(func(*kgo.Record) { got++ })
	}
	must(g.CommitUncommittedOffsets(ctx), "commit")
	out("consumed", got)

	listed, err := adm.ListGroups(ctx)
	must(err, "ListGroups")
	names := listed.Groups()
	sort.Strings(names)
	out("groups", strings.Join(names, ","))
	described, err := adm.DescribeGroups(ctx, "kadm-g")
	must(err, "DescribeGroups")
	dg := described["kadm-g"]
	out("group", fmt.Sprintf("%s|%s|%d", dg.State, dg.Protocol, len(dg.Members)))
	fetched, err := adm.FetchOffsets(ctx, "kadm-g")
	must(err, "FetchOffsets")
	o, _ := fetched.Lookup(topic, 0)
	out("committed.0", o.At)
	lag, err := adm.Lag(ctx, "kadm-g")
	must(err, "Lag")
	out("lag.0", lag["kadm-g"].Lag[topic][0].Lag)
	g.Close()

	deletedTopics, err := adm.DeleteTopics(ctx, topic)
	must(err, "DeleteTopics")
	out("delete", deletedTopics[topic].Err)
}
