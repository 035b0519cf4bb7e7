module sonde.test/hotgo

go 1.19
