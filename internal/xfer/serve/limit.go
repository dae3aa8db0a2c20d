package serve

// DefaultMaxConns bounds the connections each HTTP listener of `xfer
// serve` (tus, POST) serves at once. Beyond it a connection waits in the
// kernel's accept queue, costing us nothing, until one ends. Without a
// bound, 100 clients that each POST half a body and reset, in a loop,
// had thousands of connections accepted at once, each with its request
// buffers, and net/http's buffer pools kept what they had grown to: 366 MB
// RSS, 148 MB live (issue 23 item 6). 1,024 is far more than the upload
// buffer budget (32 MiB, 8 uploads at full speed) serves at full speed,
// and leaves most slots to honest clients while a few hundred hostile
// ones hold theirs until the header or idle timeouts close them.
const DefaultMaxConns = 1024
