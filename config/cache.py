"""The Redis cache backend: Django's, keeping one client per connection pool.

Django's ``RedisCacheClient.get_client`` wraps its pool in a new ``redis.Redis`` on every cache
call; building that object cost about 15 % of an API request's CPU (the bad-token check reads the
cache on every token request; bench/bench_cache_client.py measures it). A ``redis.Redis`` is only a
handle on its pool (a connection is taken from the pool per command), and Django's cache handler
gives each thread its own backend, so one client per pool is safe to keep.
"""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class ReusedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient
