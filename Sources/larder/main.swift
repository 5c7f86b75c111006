print("larder")
