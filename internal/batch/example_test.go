package batch_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/batch"
)

func Example() {
	const maxBody = 16 // the sink's max_message_bytes, tiny here

	var b batch.Builder
	for _, rec := range []string{"alpha", "beta", "gamma"} {
		if b.LenWith(len(rec)) > maxBody {
			fmt.Printf("send % X\n", b.Bytes()) // a real agent sends, then reuses b
			b.Reset()
		}
		if err := b.Add([]byte(rec)); err != nil {
			panic(err)
		}
	}
	body := b.Bytes()
	fmt.Printf("send % X\n", body)

	err := batch.Decode(body, func(rec []byte) error {
		fmt.Printf("record %q\n", rec)
		return nil
	})
	fmt.Println("err:", err)

	_, err = batch.Count(body[:len(body)-1])
	fmt.Println("err:", err)

	// Output:
	// send B1 01 02 05 61 6C 70 68 61 04 62 65 74 61
	// send B1 01 01 05 67 61 6D 6D 61
	// record "gamma"
	// err: <nil>
	// err: batch: malformed body at byte 3, record 0: record length 5 exceeds the 4 bytes left
}
