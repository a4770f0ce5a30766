#!/bin/sh
# compare.sh runs rstream and goverbs-rsockstream against each other in one
# soft-RoCE VM boot, so that Go's figures have C's of the same moment beside
# them: on a shared host the VM's speed moves several-fold between boots.
# rstream's default mode busy-polls (nonblocking calls retried); -T b
# blocks, as the Go rsocket always does, so C-C block is Go's control.
#
#	go build -o /var/tmp/goverbs-rsockstream ./internal/cmd/goverbs-rsockstream
#	go run ./internal/cmd/rxevm -- internal/cmd/goverbs-rsockstream/compare.sh /var/tmp/goverbs-rsockstream
#
# Each line is the client's: usec/xfer is a transfer one way.
set -u
G=$1
A=$RXE_ADDR
P=7600
pair() { # name server client rstream-args...
	name=$1 s=$2 c=$3
	shift 3
	P=$((P + 1))
	timeout 100 $s -b "$A" -p $P "$@" >/dev/null 2>&1 &
	sp=$!
	sleep 0.5
	printf '%-26s %s\n' "$name" "$(timeout 90 $c -s "$A" -p $P "$@" 2>&1 | tail -1)"
	wait $sp
}
for sz in "-S 64 -C 1 -I 2000" "-S 65536 -C 100 -I 3"; do
	echo "== $sz"
	pair "C-C spin" rstream rstream $sz
	pair "C-C block" rstream rstream $sz -T b
	pair "Go-Go" "$G" "$G" $sz
	pair "Go client, C server spin" rstream "$G" $sz
	pair "Go client, C server block" "rstream -T b" "$G" $sz
	pair "C client block, Go server" "$G" "rstream -T b" $sz
done
