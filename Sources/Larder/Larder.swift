// Larder
