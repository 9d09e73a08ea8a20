
mB	
odd@ b

oddA€