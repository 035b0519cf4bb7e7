module sonde.bench/gosym

go 1.19
