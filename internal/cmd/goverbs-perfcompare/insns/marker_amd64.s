#include "textflag.h"

// func Marker()
TEXT ·Marker(SB), NOSPLIT, $0-0
	// nopl 0x474f5642(%rax,%rax,1): insncount's marker (insncount.c)
	BYTE $0x0f; BYTE $0x1f; BYTE $0x84; BYTE $0x00
	BYTE $0x42; BYTE $0x56; BYTE $0x4f; BYTE $0x47
	RET
