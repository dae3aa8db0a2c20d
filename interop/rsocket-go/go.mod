module example.com/interop/rsocketgo

go 1.26.8

require (
	github.com/rsocket/rsocket-go v0.8.16
	github.com/sluicehq/sluice v0.0.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/google/uuid v1.1.2 // indirect
	github.com/gorilla/websocket v1.4.2 // indirect
	github.com/jjeffcaii/reactor-go v0.5.6 // indirect
	github.com/panjf2000/ants/v2 v2.5.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)

replace github.com/sluicehq/sluice => ../..
