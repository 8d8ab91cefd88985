module raftset

go 1.26.8
