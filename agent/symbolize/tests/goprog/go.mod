module sonde.test/goprog

go 1.19
