package serve

// URLs are the bound listeners as clients name them, one line each in
// the order gRPC, RSocket, tus, HTTP POST: "grpc grpc://HOST:PORT",
// "rsocket tcp://HOST:PORT", "tus http://HOST:PORT/files/",
// "http http://HOST:PORT/post/"; what `sluice xfer serve` prints after
// "listening".
func (l Listen) URLs() []string {
	var urls []string
	if l.GRPC != "" {
		urls = append(urls, "grpc grpc://"+l.GRPC)
	}
	if l.RSocket != "" {
		urls = append(urls, "rsocket "+l.RSocket)
	}
	if l.TUS != "" {
		urls = append(urls, "tus http://"+l.TUS+"/files/")
	}
	if l.HTTP != "" {
		urls = append(urls, "http http://"+l.HTTP+"/post/")
	}
	return urls
}
