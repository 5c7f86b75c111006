// LarderAuth
