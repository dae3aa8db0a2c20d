package metricsgen_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/lab/metricsgen"
)

func ExampleGenerator_AppendRecord() {
	g, err := metricsgen.New(metricsgen.Config{Seed: 1, Hosts: 3})
	if err != nil {
		panic(err)
	}
	var line []byte
	for range 3 {
		line = g.AppendRecord(line[:0])
		fmt.Println(string(line))
	}
	// Output:
	// pg_database_size_bytes{datname="postgres",instance="10.30.111.44:9187",job="postgres",region="eu-west-1",zone="eu-west-1b"} 7.86432e+06 1700000003800
	// pg_locks_count{datname="postgres",instance="10.30.111.44:9187",job="postgres",mode="accessexclusivelock",region="eu-west-1",zone="eu-west-1b"} 0 1700000003800
	// pg_locks_count{datname="postgres",instance="10.30.111.44:9187",job="postgres",mode="accesssharelock",region="eu-west-1",zone="eu-west-1b"} 0 1700000003800
}

func ExampleGenerator_NextMessage() {
	g, err := metricsgen.New(metricsgen.DefaultConfig())
	if err != nil {
		panic(err)
	}
	var msg [][]byte
	for range 3 {
		msg = g.NextMessage(msg) // valid until the next call
		size := 0
		for _, r := range msg {
			size += len(r)
		}
		fmt.Printf("%d records, %d bytes\n", len(msg), size)
	}
	// Output:
	// 17 records, 2589 bytes
	// 39 records, 5635 bytes
	// 44 records, 6651 bytes
}
