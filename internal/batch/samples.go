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
