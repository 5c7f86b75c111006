"""The peers Larder is measured against, and the engines it runs on (PostgreSQL, Swift's S3 API)."""
