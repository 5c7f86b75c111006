// LarderRules
