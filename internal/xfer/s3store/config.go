package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Location is where a store keeps its uploads: what --store
// s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT[&region=R] says.
type Location struct {
	Bucket, Prefix   string // Prefix is "" or ends in "/"
	Endpoint, Region string
}

// ParseURL parses s3://BUCKET[/PREFIX]?endpoint=URL[&region=R]. The
// endpoint is required (path-style addressing against that host); the
// region defaults to us-east-1, which S3-compatible stores ignore.
func ParseURL(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("--store %q: %v", s, err)
	}
	if u.Scheme != "s3" || u.Host == "" {
		return Location{}, fmt.Errorf("--store %q: want s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT", s)
	}
	q := u.Query()
	for k := range q {
		if k != "endpoint" && k != "region" {
			return Location{}, fmt.Errorf("--store %q: unknown parameter %q (endpoint, region)", s, k)
		}
	}
	l := Location{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/"), Endpoint: q.Get("endpoint"), Region: q.Get("region")}
	if l.Prefix != "" {
		l.Prefix += "/"
	}
	if l.Region == "" {
		l.Region = "us-east-1"
	}
	e, err := url.Parse(l.Endpoint)
	if l.Endpoint == "" || err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
		return Location{}, fmt.Errorf("--store %q: endpoint=http://HOST:PORT (or https://) is required", s)
	}
	return l, nil
}

// String is the location as ParseURL reads it.
func (l Location) String() string {
	return "s3://" + l.Bucket + "/" + l.Prefix + "?endpoint=" + l.Endpoint + "&region=" + l.Region
}

// errNoCredentials: the store's identity comes only from the environment.
var errNoCredentials = errors.New("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the object store")

// Client is an S3 client for l with path-style addressing (an
// S3-compatible store on one host: SeaweedFS, MinIO, Ceph) and the
// credentials of AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
func Client(l Location) (*s3.Client, error) {
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id == "" || secret == "" {
		return nil, errNoCredentials
	}
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}
	cfg := aws.Config{
		Region: l.Region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		}),
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(l.Endpoint)
		o.UsePathStyle = true
	}), nil
}
