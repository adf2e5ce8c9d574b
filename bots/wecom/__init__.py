"""WeCom (企业微信) group robot: a send-only group webhook platform."""
