package batch

import (
	"bufio"
	"io"
)

// Samples reads records, one per non-empty line, from inputs and packs
// them into message bodies exactly as the agent builds them (this
// package's framing, up to messageBytes each): what a zstd dictionary for
// those messages is trained on (`sluice dict train`).
func Samples(inputs []io.Reader, messageBytes int) ([][]byte, error) {
	var samples [][]byte
	var b Builder
	flush := func() {
		if b.Count() > 0 {
			samples = append(samples, append([]byte(nil), b.Bytes()...))
			b.Reset()
		}
	}
	for _, in := range inputs {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			if len(sc.Bytes()) == 0 {
				continue
			}
			if b.Count() > 0 && b.LenWith(len(sc.Bytes())) > messageBytes {
				flush()
			}
			if err := b.Add(sc.Bytes()); err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	flush()
	return samples, nil
}

// PackSamples packs binary records (a collector's protobuf requests, which
// cannot be split into lines) into message bodies as the agent builds
// them, up to messageBytes each; a record larger than that is a message
// of its own, as it would be in the agent.
func PackSamples(records [][]byte, messageBytes int) ([][]byte, error) {
	var samples [][]byte
	var b Builder
	for _, r := range records {
		if b.Count() > 0 && b.LenWith(len(r)) > messageBytes {
			samples = append(samples, append([]byte(nil), b.Bytes()...))
			b.Reset()
		}
		if err := b.Add(r); err != nil {
			return nil, err
		}
	}
	if b.Count() > 0 {
		samples = append(samples, append([]byte(nil), b.Bytes()...))
	}
	return samples, nil
}
