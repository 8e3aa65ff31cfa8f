def test_media_needs_login_and_supports_range_requests(client, make_user, settings):
    (settings.MEDIA_ROOT / "assets").mkdir()
    (settings.MEDIA_ROOT / "assets" / "clip.mp4").write_bytes(bytes(range(200)))

    assert client.get("/media/assets/clip.mp4").status_code == 302  # to the login page

    client.force_login(make_user())
    whole = client.get("/media/assets/clip.mp4")
    assert whole.status_code == 200
    assert b"".join(whole.streaming_content) == bytes(range(200))
    assert whole["Accept-Ranges"] == "bytes"

    part = client.get("/media/assets/clip.mp4", HTTP_RANGE="bytes=10-19")
    assert part.status_code == 206
    assert part["Content-Range"] == "bytes 10-19/200"
    assert b"".join(part.streaming_content) == bytes(range(10, 20))

    tail = client.get("/media/assets/clip.mp4", HTTP_RANGE="bytes=-5")
    assert b"".join(tail.streaming_content) == bytes(range(195, 200))
    assert client.get("/media/assets/clip.mp4", HTTP_RANGE="bytes=500-").status_code == 416


def test_media_paths_cannot_leave_the_media_root(client, make_user, settings, tmp_path):
    (tmp_path / "secret.txt").write_text("no")
    client.force_login(make_user())
    assert client.get("/media/../secret.txt").status_code == 404
    assert client.get("/media/%2e%2e/secret.txt").status_code == 404
    assert client.get("/media/missing.png").status_code == 404
