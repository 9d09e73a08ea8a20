
m1*
input__0FP64
€€€€€€€€ 2
	output__02
treeshap_output