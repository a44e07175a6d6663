package main

import (
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func unmarshalConfChange(b []byte, cc *pb.ConfChange) error { return proto.Unmarshal(b, cc) }
