module sonde.bench/godebugelf

go 1.19
