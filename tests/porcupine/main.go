// Command porcupine-check checks raftmeta client histories with Porcupine, for the differential
// test of raftmeta/lincheck (tests/lincheck/test_porcupine_differential.py).
//
// Input (stdin): one history a line, {"name": ..., "ops": [operation, ...]}, each operation as
// raftmeta/lincheck/codec.py writes it. Output (stdout): one line a history, in order,
// {"name": ..., "verdict": "ok" | "illegal" | "unknown"}.
//
// The model is raftmeta/lincheck/model.py's, written again against Porcupine's API: a topic's
// state is 0 (absent) or its partition count (a describe may also observe -1, listed: present
// with its count not shown); the history is partitioned per topic name; an
// operation whose outcome is unknown returns at +infinity and accepts either outcome.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type jsonOp struct {
	OpID     int    `json:"op_id"`
	Client   int    `json:"client"`
	Topic    string `json:"topic"`
	Kind     string `json:"kind"`
	Invoke   int64  `json:"invoke"`
	Complete *int64 `json:"complete"`
	Result   string `json:"result"`
	Arg      int    `json:"arg"`
	Observed *int   `json:"observed"`
}

type history struct {
	Name string   `json:"name"`
	Ops  []jsonOp `json:"ops"`
}

type verdict struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
}

type input struct {
	Topic string
	Kind  string
	Arg   int
}

type output struct {
	Result   string
	Observed int
}

const (
	absent = 0
	listed = -1 // a describe saw the topic without its partitions: present, count not shown
)

func step(state, in, out interface{}) (bool, interface{}) {
	s := state.(int)
	i := in.(input)
	o := out.(output)
	unknown := o.Result == "unknown"
	present := s != absent
	switch i.Kind {
	case "describe":
		return unknown || o.Observed == s || (o.Observed == listed && present), s
	case "create":
		if !present {
			return unknown || o.Result == "ok", i.Arg
		}
		return unknown || o.Result == "topic_already_exists", s
	case "delete":
		if present {
			return unknown || o.Result == "ok", absent
		}
		return unknown || o.Result == "unknown_topic_or_partition", s
	case "create_partitions":
		if !present {
			return unknown || o.Result == "unknown_topic_or_partition", s
		}
		if s < i.Arg {
			return unknown || o.Result == "ok", i.Arg
		}
		return unknown || o.Result == "invalid_partitions", s
	}
	panic(fmt.Sprintf("unknown operation kind %q", i.Kind))
}

var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byTopic := map[string][]porcupine.Operation{}
		for _, op := range history {
			topic := op.Input.(input).Topic
			byTopic[topic] = append(byTopic[topic], op)
		}
		topics := make([]string, 0, len(byTopic))
		for topic := range byTopic {
			topics = append(topics, topic)
		}
		sort.Strings(topics)
		partitions := make([][]porcupine.Operation, 0, len(topics))
		for _, topic := range topics {
			partitions = append(partitions, byTopic[topic])
		}
		return partitions
	},
	Init:  func() interface{} { return absent },
	Step:  step,
	Equal: func(a, b interface{}) bool { return a.(int) == b.(int) },
	DescribeOperation: func(in, out interface{}) string {
		i, o := in.(input), out.(output)
		if i.Kind == "describe" && o.Result == "ok" {
			return fmt.Sprintf("%s describe -> %d", i.Topic, o.Observed)
		}
		return fmt.Sprintf("%s %s(%d) -> %s", i.Topic, i.Kind, i.Arg, o.Result)
	},
	DescribeState: func(state interface{}) string { return fmt.Sprintf("%d", state.(int)) },
}

func operations(h history) []porcupine.Operation {
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for _, op := range h.Ops {
		ret := int64(math.MaxInt64) // an unknown outcome may take effect at any time after the call
		if op.Result != "unknown" && op.Complete != nil {
			ret = *op.Complete
		}
		observed := 0
		if op.Observed != nil {
			observed = *op.Observed
		}
		ops = append(ops, porcupine.Operation{
			ClientId: op.Client,
			Input:    input{op.Topic, op.Kind, op.Arg},
			Call:     op.Invoke,
			Output:   output{op.Result, observed},
			Return:   ret,
		})
	}
	return ops
}

func main() {
	timeout := flag.Duration("timeout", 30*time.Second, "per-history limit; past it the verdict is unknown")
	flag.Parse()
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<30)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	encoder := json.NewEncoder(out)
	for scanner.Scan() {
		if len(scanner.Bytes()) == 0 {
			continue
		}
		var h history
		if err := json.Unmarshal(scanner.Bytes(), &h); err != nil {
			fmt.Fprintf(os.Stderr, "porcupine-check: bad history line: %v\n", err)
			os.Exit(2)
		}
		result, _ := porcupine.CheckOperationsVerbose(model, operations(h), *timeout)
		v := map[porcupine.CheckResult]string{porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown"}[result]
		if err := encoder.Encode(verdict{h.Name, v}); err != nil {
			fmt.Fprintf(os.Stderr, "porcupine-check: %v\n", err)
			os.Exit(2)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "porcupine-check: reading stdin: %v\n", err)
		os.Exit(2)
	}
}
